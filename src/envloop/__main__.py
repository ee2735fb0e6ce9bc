from envloop.cli.main import run

run()
