"""python -m cxxrun: the launcher, exactly as the `cxxrun` program.

    python -m cxxrun --nproc-per-node=2 train.py

runs the program in this process's place (exec): the one a wheel install
carries, else the `cxxrun` on PATH (the .deb, a source build). Which one, and
why never this package's own console script: cxxrun/_launcher.py. Nothing
runs at import: every copy of the package, each worker's included, holds this
file.
"""

if __name__ == "__main__":
    from cxxrun import _launcher

    _launcher.run("cxxrun")
