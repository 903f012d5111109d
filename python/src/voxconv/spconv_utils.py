"""The names OpenPCDet's backbones import from pcdet.utils.spconv_utils, on voxconv:
`from voxconv.spconv_utils import replace_feature, spconv` is the one line a backbone's source
changes to run on voxconv."""
from . import spconv
from .spconv import replace_feature

__all__ = ["spconv", "replace_feature"]
