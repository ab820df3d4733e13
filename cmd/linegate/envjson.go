package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/linegate/linegate/internal/stack"
	"github.com/linegate/linegate/internal/template"
)

// envJSONCommand is `linegate env-json`: it writes a `sam local invoke --env-vars` file that points each
// function at a deployed (dev) stack: every variable the template sets with
// a Ref gets the stack's physical id (a queue URL, topic ARN, bus or table
// name) or parameter value, and AWS_ENDPOINT_URL is emptied so the SDK calls
// AWS.
func envJSONCommand(fs *flag.FlagSet) action {
	sf := addStackFlags(fs, "the deployed stack (e.g. linegate-dev)")
	tpl := fs.String("template", "template.yaml", "the template the stack was deployed from")
	out := fs.String("out", "", "write here instead of stdout (e.g. events/env.dev.json)")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if *sf.stack == "" || len(args) != 0 {
			return usageError{"usage: linegate env-json --stack NAME [--template template.yaml] [--out FILE]"}
		}
		data, err := os.ReadFile(*tpl)
		if err != nil {
			return err
		}
		_, st, err := sf.open(ctx)
		if err != nil {
			return err
		}
		env, err := envForStack(data, st)
		if err != nil {
			return err
		}
		b, _ := json.MarshalIndent(env, "", "  ")
		b = append(b, '\n')
		if *out == "" {
			_, err = stdout.Write(b)
			return err
		}
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: sam local invoke FUNCTION -e events/… --env-vars %s\n", *out, *out)
		return nil
	}
}

// envForStack maps each function of the template to the values its Ref
// variables have in the deployed stack.
func envForStack(tpl []byte, st *stack.Stack) (map[string]map[string]string, error) {
	doc, err := template.Decode(tpl)
	if err != nil {
		return nil, err
	}
	vars := func(m any) map[string]any {
		mm, _ := m.(map[string]any)
		env, _ := mm["Environment"].(map[string]any)
		v, _ := env["Variables"].(map[string]any)
		return v
	}
	globals, _ := doc["Globals"].(map[string]any)
	resources, _ := doc["Resources"].(map[string]any)
	out := map[string]map[string]string{}
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r, _ := resources[id].(map[string]any)
		if r["Type"] != "AWS::Serverless::Function" {
			continue
		}
		merged := map[string]any{}
		for k, v := range vars(globals["Function"]) {
			merged[k] = v
		}
		for k, v := range vars(r["Properties"]) {
			merged[k] = v
		}
		fn := map[string]string{}
		for name, v := range merged {
			m, _ := v.(map[string]any)
			ref, _ := m["Ref"].(string)
			if res, ok := st.Resources[ref]; ok {
				fn[name] = res.PhysicalID
			} else if p, ok := st.Parameters[ref]; ok {
				fn[name] = p
			}
		}
		if _, ok := merged["AWS_ENDPOINT_URL"]; ok {
			fn["AWS_ENDPOINT_URL"] = ""
		}
		out[id] = fn
	}
	return out, nil
}
