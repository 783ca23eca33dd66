"""minibert: BERT pre-training from scratch, forward and backward by hand in NumPy (and CuPy)."""
from .launcher import start_mpi_if_launched

start_mpi_if_launched()   # under mpiexec -n N, first of all (see launcher.py); otherwise nothing
from .model import PRESETS, BertConfig, BertForPreTraining, BertModel, BertOutput, PreTrainingOutput
from . import accel, gradcheck, ops

__version__ = "0.1.0"
__all__ = ["BertConfig", "PRESETS", "BertModel", "BertForPreTraining", "BertOutput",
           "PreTrainingOutput", "accel", "gradcheck", "ops", "__version__"]
