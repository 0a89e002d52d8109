"""The probe of the gallery servers' effects (``limbo conform --probe``): every charge and email
of a gallery database, one JSON object a line — standard library only, so that running it
before and after each check costs a Python start and no more.

    python -S tests/support/conform_probe.py DB
"""

import json
import sqlite3
import sys

conn = sqlite3.connect(sys.argv[1])
for table in ("charges", "emails"):
    cursor = conn.execute(f"select * from {table} order by rowid")
    names = [d[0] for d in cursor.description]
    for row in cursor:
        sys.stdout.write(json.dumps({"table": table, **dict(zip(names, row, strict=True))}) + "\n")
