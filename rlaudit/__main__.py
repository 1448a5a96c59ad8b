from rlaudit.cli import main

main()
