-- =====================================================================================
-- HAND-WRITTEN, NOT A VERBATIM EXTRACT.  The es_CO translation export (core_es_CO/) has the
-- text of core windows and tabs but not how they fit together (no AD_Tab.AD_Window_ID, no
-- AD_Table rows, no fields).  To give the demo a few complete classic windows, this file links
-- core tabs that ARE in core_es_CO/ad_tab.csv to their windows and tables, with the AD_Table_IDs,
-- AD_Window_IDs and TableNames of iDempiere's seed database (written from knowledge of the
-- seed, not extracted).  Tab text (Name/Description/Help, es_CO) comes from the CSVs at load time.
-- Tabs 224 (Vendor) and 225 (Employee), and the columns and fields of C_BPartner (IDs 9000001+,
-- not the seed's), have English text written for this demo in the words of the dictionary.
-- Licence: GPL-2.0-or-later, like the iDempiere dictionary it describes.
-- =====================================================================================

INSERT INTO AD_Table (AD_Client_ID, AD_Org_ID, AD_Table_ID, AccessLevel, CreatedBy, UpdatedBy, EntityType,
                      Name, TableName, Description, Created, Updated)
SELECT 0, 0, t.id, '3', 100, 100, 'D', t.name, t.tablename, t.description,
       TIMESTAMP '2022-09-01 00:00:00', TIMESTAMP '2022-09-01 00:00:00'
FROM (VALUES
  (100, 'Table', 'AD_Table', 'Table for the Fields'),
  (114, 'User/Contact', 'AD_User', 'User within the system - Internal or Business Partner Contact'),
  (259, 'Order', 'C_Order', 'Order'),
  (260, 'Sales Order Line', 'C_OrderLine', 'Sales Order Line'),
  (291, 'Business Partner', 'C_BPartner', 'Identifies a Business Partner'),
  (318, 'Invoice', 'C_Invoice', 'Invoice Identifier'),
  (333, 'Invoice Line', 'C_InvoiceLine', 'Invoice Detail Line'),
  (334, 'Invoice Tax', 'C_InvoiceTax', 'Tax for a document'),
  (335, 'Payment', 'C_Payment', 'Payment identifier')
) AS t(id, name, tablename, description);

-- Which window and table each core tab of core_es_CO/ad_tab.csv belongs to; demo_db.py reads
-- this table, inserts the tabs with their CSV text, then drops it.
CREATE TEMP TABLE demo_core_tab (AD_Tab_ID NUMERIC(10), AD_Window_ID NUMERIC(10), AD_Table_ID NUMERIC(10),
                                 SeqNo NUMERIC(10), TabLevel NUMERIC(10));
INSERT INTO demo_core_tab VALUES
  (100, 100, 100, 10, 0),
  (186, 143, 259, 10, 0),
  (187, 143, 260, 40, 1),
  (220, 123, 291, 10, 0),
  (223, 123, 291, 20, 1),
  (496, 123, 114, 60, 1),
  (263, 167, 318, 10, 0),
  (270, 167, 333, 20, 1),
  (271, 167, 334, 30, 1),
  (290, 183, 318, 10, 0),
  (291, 183, 333, 20, 1),
  (330, 195, 335, 10, 0);

-- Two tabs of the Business Partner window that the tab sample of core_es_CO lacks; their
-- text is written after the Customer tab's (which the CSV has). No es_CO text: the source
-- falls back to English for them, as iDempiere does for untranslated rows.
INSERT INTO AD_Tab (AD_Client_ID, AD_Org_ID, AD_Tab_ID, AD_Window_ID, AD_Table_ID, SeqNo, TabLevel, EntityType,
                    Name, Description, Help, CreatedBy, UpdatedBy, Created, Updated)
SELECT 0, 0, t.id, 123, 291, t.seq, 1, 'D', t.name, t.description, t.help, 100, 100,
       TIMESTAMP '2022-09-01 00:00:00', TIMESTAMP '2022-09-01 00:00:00'
FROM (VALUES
  (224, 30, 'Vendor', 'Define Vendor Parameters',
   'The Vendor Tab defines a Business Partner that is a Vendor for this Organization.  If the Vendor check box is selected the necessary fields will display.'),
  (225, 40, 'Employee', 'Define Employee Parameters',
   'The Employee Tab defines a Business Partner who is an Employee of this organization.  If the Employee is also a Sales Representative then the check box should be selected.')
) AS t(id, seq, name, description, help);

INSERT INTO AD_Column (AD_Client_ID, AD_Org_ID, AD_Column_ID, AD_Element_ID, AD_Reference_ID, AD_Table_ID,
                       ColumnName, Name, Description, EntityType, IsKey, IsMandatory, FieldLength, Version,
                       CreatedBy, UpdatedBy, Created, Updated)
SELECT 0, 0, c.id, 0, c.ref, 291, c.columnname, c.name, c.description, 'D', c.iskey, c.mandatory, c.len, 0,
       100, 100, TIMESTAMP '2022-09-01 00:00:00', TIMESTAMP '2022-09-01 00:00:00'
FROM (VALUES
  (9000001, 13, 'C_BPartner_ID', 'Business Partner', 'Identifies a Business Partner', 'Y', 'Y', 10),
  (9000002, 10, 'Value', 'Search Key', 'Search key for the record in the format required - must be unique', 'N', 'Y', 40),
  (9000003, 10, 'Name', 'Name', 'Alphanumeric identifier of the entity', 'N', 'Y', 60),
  (9000004, 19, 'C_BP_Group_ID', 'Business Partner Group', 'Business Partner Group', 'N', 'Y', 10),
  (9000005, 20, 'IsCustomer', 'Customer', 'Indicates if this Business Partner is a Customer', 'N', 'Y', 1),
  (9000006, 20, 'IsVendor', 'Vendor', 'Indicates if this Business Partner is a Vendor', 'N', 'Y', 1),
  (9000007, 20, 'IsEmployee', 'Employee', 'Indicates if this Business Partner is an employee', 'N', 'Y', 1),
  (9000008, 18, 'SalesRep_ID', 'Sales Representative', 'Sales Representative or Company Agent', 'N', 'N', 10),
  (9000009, 18, 'M_PriceList_ID', 'Price List', 'Unique identifier of a Price List', 'N', 'N', 10)
) AS c(id, ref, columnname, name, description, iskey, mandatory, len);

INSERT INTO AD_Field (AD_Client_ID, AD_Org_ID, AD_Field_ID, AD_Column_ID, AD_Tab_ID, EntityType, Name,
                      Description, Help, SeqNo, IsDisplayed, CreatedBy, UpdatedBy, Created, Updated)
SELECT 0, 0, f.id, f.col, f.tab, 'D', f.name, f.description, f.help, f.seq, f.displayed, 100, 100,
       TIMESTAMP '2022-09-01 00:00:00', TIMESTAMP '2022-09-01 00:00:00'
FROM (VALUES
  (9000101, 9000001, 220, 'Business Partner', 'Identifies a Business Partner',
   'A Business Partner is anyone with whom you transact.  This can include Vendor, Customer, Employee or Salesperson', 0, 'N'),
  (9000102, 9000002, 220, 'Search Key', 'Search key for the record in the format required - must be unique',
   'A search key allows you a fast method of finding a particular record. If you leave the search key empty, the system automatically creates a numeric number.', 10, 'Y'),
  (9000103, 9000003, 220, 'Name', 'Alphanumeric identifier of the entity',
   'The name of an entity (record) is used as an default search option in addition to the search key.', 20, 'Y'),
  (9000104, 9000004, 220, 'Business Partner Group', 'Business Partner Group',
   'The Business Partner Group provides a method of defining defaults to be used for individual Business Partners.', 30, 'Y'),
  (9000105, 9000007, 225, 'Employee', 'Indicates if this Business Partner is an employee',
   'The Employee checkbox indicates if this Business Partner is an Employee.  If it is selected, additional fields will display which further identify this employee.', 40, 'Y'),
  (9000106, 9000006, 224, 'Vendor', 'Indicates if this Business Partner is a Vendor',
   'The Vendor checkbox indicates if this Business Partner is a Vendor.  If it is selected, additional fields will display which further identify this vendor.', 50, 'Y'),
  (9000201, 9000005, 223, 'Customer', 'Indicates if this Business Partner is a Customer',
   'The Customer checkbox indicates if this Business Partner is a customer.  If it is select additional fields will display which further define this customer.', 10, 'Y'),
  (9000202, 9000008, 223, 'Sales Representative', 'Sales Representative or Company Agent',
   'The Sales Representative indicates the Sales Rep for this Region.  Any Sales Rep must be a valid internal user.', 20, 'Y'),
  (9000203, 9000009, 223, 'Price List', 'Unique identifier of a Price List',
   'Price Lists are used to determine the pricing, margin and cost of items purchased or sold.', 30, 'Y')
) AS f(id, col, tab, name, description, help, seq, displayed);
