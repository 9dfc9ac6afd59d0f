"""timm's weights (PyTorch Image Models' safetensors files) into our nets, read with
numpy: no PyTorch at run time.

Engine: `safetensors` (the reader), `files` (a file, a Hugging Face snapshot folder, or
hf_hub:<id>), `mapping` (the name-mapping engine and its checks), `transfer` (the
import's steps), `catalog` (which nets take timm weights). import_timm_weights.py and
cli/timm_import_job.py drive them.

Adding a family: one module here, e.g. nets/timm_import/convnext_v2.py, that declares

    from nets.timm_import.mapping import TimmFamily

    FAMILY = TimmFamily(
        architectures={'convnext_v2_atto': ('convnextv2_atto',), ...},  # ours -> timm's
        names=(('stem/conv', 'stem.0'),                    # our module path under the
               ('stage_<i>/block_<j>/depthwise_conv',       # net's scope -> timm's;
                'stages.<i>.blocks.<j>.conv_dw'), ...),     # <i>, <j>: numbers
        classifier='head.fc')                               # timm's classifier module

(a net module's own table, e.g. nets/convnext_v2.py's TIMM_NAMES, can be passed as
`names` as it is). The catalog finds every module here with a FAMILY; no list to edit.
A timm tensor '<module>.<param>' fills '<our module>/<role>': param weight -> weights,
depthwise_weights or gamma, bias -> biases or beta, whichever our module has; an entry
whose timm side is a whole tensor name ('pos_embed', 'stages.<i>.blocks.<j>.gamma')
fills the variable named on our side. Layouts follow from our role (OIHW -> HWIO,
depthwise, linear transposed, a 1x1 conv as a dense layer); `ignored` lists tensors
with no counterpart that do not change the logits. Prove a family with a golden written
by maintainer/timm_goldens.py (tests/data/timm/<name>/) and a test in
tests/nets/timm_import/.
"""
