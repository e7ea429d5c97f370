from vtx.cli import main

main()
