from memoryd.cli import main

raise SystemExit(main())
