"""Readers for PNNX files: the `.pnnx.param` text, the `.pnnx.bin` zip, and expressions."""

from kuiper.parser.binfile import WeightArchive
from kuiper.parser.param import AttributeDecl, OperatorDef, ParamFile, parse_param_text, read_param
from kuiper.parser.values import DTYPES, parse_dtype_suffix, parse_value

__all__ = [
    "WeightArchive", "AttributeDecl", "OperatorDef", "ParamFile", "read_param",
    "parse_param_text", "parse_value", "parse_dtype_suffix", "DTYPES",
]
