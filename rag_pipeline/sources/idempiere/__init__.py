"""The iDempiere database sources: knowledge-base entries and the Application Dictionary."""
