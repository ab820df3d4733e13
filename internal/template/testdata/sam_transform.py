"""Transforms SAM templates with the SAM translator (samtranslator), offline.

Usage: python3 sam_transform.py TEMPLATE...
Prints one JSON object: each template path -> {"template": the transformed
CloudFormation template} or {"error": why the translator refused it}.

It is what `sam deploy` asks CloudFormation's AWS::Serverless transform to do,
run here: the YAML is decoded by cfn-lint (short-form intrinsics, anchors), local
CodeUris are replaced by S3 locations as the SAM CLI does after `sam build`,
and managed policy names resolve through the table cfn-lint ships (the SAM
CLI's own), so no AWS call is made.
"""
import json
import os
import sys

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

import cfnlint.data  # noqa: E402
from cfnlint.decode import decode_str  # noqa: E402
from cfnlint.helpers import load_resource  # noqa: E402
from samtranslator.parser import parser  # noqa: E402
from samtranslator.translator.translator import Translator  # noqa: E402

MANAGED = load_resource(cfnlint.data.Serverless, "ManagedPolicies.json")


def transform(path):
    with open(path) as f:
        tpl, matches = decode_str(f.read())
    if matches:
        return {"error": "; ".join(str(m) for m in matches)}
    params = {}
    for name, p in (tpl.get("Parameters") or {}).items():
        if "Default" in p:
            params[name] = str(p["Default"])
    params.setdefault("OperatorLineIds", "U" + "0" * 32)
    for r in (tpl.get("Resources") or {}).values():
        props = r.get("Properties") or {}
        if r.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = "s3://bucket/code.zip"
    try:
        out = Translator(managed_policy_map=MANAGED, sam_parser=parser.Parser()).translate(
            sam_template=json.loads(json.dumps(tpl)), parameter_values=params)
    except Exception as e:  # the translator's own InvalidDocumentException and friends
        causes = getattr(e, "causes", None)
        return {"error": "; ".join(getattr(c, "message", str(c)) for c in causes) if causes else str(e)}
    return {"template": out}


print(json.dumps({p: transform(p) for p in sys.argv[1:]}))
