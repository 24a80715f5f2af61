"""The measurements outside the registry's workloads, one module each, run as subcommands of
``bench/run.py`` (:mod:`harness.main` names them): each has ``parser()`` (argparse) and
``main(argv)``."""
