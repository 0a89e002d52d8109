"""``python -m limbo.harnesses.production``: install the pinned harnesses that are missing."""

from limbo.harnesses.production.install import main

raise SystemExit(main())
