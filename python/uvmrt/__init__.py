"""uvmrt: a unified-memory oversubscription runtime for training beyond GPU memory.

This package is a pure-Python binding over libuvmrt.so (ctypes).  `uvmrt.torch`
trains an ordinary torch.nn.Module beyond the GPU's memory; see its docstring.
"""

__version__ = "0.1.0"


def library_version():
    """The version of the libuvmrt this package loaded ("MAJOR.MINOR.PATCH")."""
    from ._lib import lib
    return lib().uvmrt_version_string().decode()
