"""The run record and the files built from it: schema, junit.xml, report.json."""
