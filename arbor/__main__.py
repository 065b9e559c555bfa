from arbor.cli import main

main()
