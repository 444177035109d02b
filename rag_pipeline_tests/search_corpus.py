"""A small hand-made corpus with known answers for the search tests (written by us)."""

from rag_pipeline_tests.search_support import Doc

WAREHOUSE = Doc(
    "files",
    "kb/warehouse.md",
    "Warehouse and locators",
    "# Warehouse and locators\n\n"
    "## Locators\n\n"
    "A locator (table M_Locator) says where stock is kept inside a warehouse: its aisle (X), "
    "bin (Y) and level (Z). Every warehouse has one default locator.\n\n"
    "## Storage\n\n"
    "On-hand quantities are stored per locator, product and attribute set instance.\n",
    breadcrumb="Guides / Materials",
)
PARTNERS = Doc(
    "files",
    "kb/partners.md",
    "Business partners",
    "# Business partners\n\n"
    "Customers, vendors and employees are all business partners. The column C_BPartner_ID "
    "links an order or an invoice to its business partner.\n",
    breadcrumb="Guides / Partners",
)
EVENTS = Doc(
    "files",
    "dev/events.md",
    "Event handlers",
    "# Event handlers\n\n"
    "An event handler reacts before a document is completed:\n\n"
    "```java\n"
    'if (order.getDocStatus().equals("CO")) {\n'
    '    int asi = line.get_ValueAsInt("M_AttributeSetInstance_ID");\n'
    "}\n"
    "```\n",
    breadcrumb="Development",
)
ORDERS_EN = Doc(
    "files",
    "ad/window/143.md",
    "Sales Order",
    "# Sales Order\n\nEnter and change sales orders.\n\n"
    "The Order window allows you to enter and modify sales orders of your customers.\n",
)
ORDERS_ES = Doc(
    "files",
    "ad/window/143.es_CO.md",
    "Órdenes de Venta",
    "# Órdenes de Venta\n\nEntrar y cambiar órdenes de ventas.\n\n"
    "La ventana permite entrar y modificar las órdenes de venta de sus clientes.\n",
    language="es_CO",
)
INVOICE_ES = Doc(
    "files",
    "ad/window/167.es_CO.md",
    "Facturas y CxC (Cliente)",
    "# Facturas y CxC (Cliente)\n\nEntrar factura de cliente.\n\n"
    "La ventana permite desplegar y entrar facturas para un cliente. Las facturas pueden "
    "también ser generadas desde una orden de venta o una entrega.\n",
    language="es_CO",
)
PERIODS = Doc(
    "files",
    "kb/periods.md",
    "Month-end closing",
    "# Month-end closing\n\n"
    "## Periods\n\nOpen and close accounting periods per document base type.\n\n"
    "## Reports\n\nRun the trial balance and the balance sheet before closing.\n",
    breadcrumb="Guides / Accounting",
)
PRICES = Doc(
    "files",
    "kb/prices.md",
    "Price lists",
    "# Price lists\n\nA price list has versions; each version holds product prices valid from "
    "a date. Sales and purchase price lists are separate.\n",
    breadcrumb="Guides / Materials",
)
# Many chunks of one long section that all match "stock count": one hit for all of them.
COUNTING = Doc(
    "files",
    "kb/counting.md",
    "Physical inventory",
    "# Physical inventory\n\n## Counting\n\n"
    + "\n\n".join(
        f"Count number {i}: the stock count of every product in aisle {i} is entered as the "
        "counted quantity, and the difference to the book quantity becomes an inventory "
        "adjustment."
        for i in range(40)
    )
    + "\n",
    breadcrumb="Guides / Materials",
)

CORPUS = [WAREHOUSE, PARTNERS, EVENTS, ORDERS_EN, ORDERS_ES, INVOICE_ES, PERIODS, PRICES, COUNTING]
