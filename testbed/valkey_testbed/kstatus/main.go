// kstatus: what sigs.k8s.io/cli-utils' kstatus library (the status model Flux, kpt and
// `kubectl wait`-style tools share) computes for Kubernetes objects. It reads JSON objects
// from stdin (one after another, or a JSON list, or a List kind's items) and prints one JSON
// line per object: {"status": "Current|InProgress|Failed|Terminating|Unknown", "message": ...}.
//
// Built by valkey_testbed/kstatus (go.mod.tmpl pins the cli-utils version).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type line struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func emit(out *json.Encoder, obj map[string]interface{}) error {
	if items, ok := obj["items"].([]interface{}); ok {
		for _, item := range items {
			if err := emitAny(out, item); err != nil {
				return err
			}
		}
		return nil
	}
	result, err := status.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return err
	}
	return out.Encode(line{Status: result.Status.String(), Message: result.Message})
}

func emitAny(out *json.Encoder, value interface{}) error {
	switch v := value.(type) {
	case map[string]interface{}:
		return emit(out, v)
	case []interface{}:
		for _, item := range v {
			if err := emitAny(out, item); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("not an object or a list of objects: %T", value)
	}
}

func main() {
	in := json.NewDecoder(os.Stdin)
	in.UseNumber()
	out := json.NewEncoder(os.Stdout)
	for {
		var value interface{}
		err := in.Decode(&value)
		if errors.Is(err, io.EOF) {
			return
		}
		if err == nil {
			err = emitAny(out, normalize(value))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kstatus:", err)
			os.Exit(1)
		}
	}
}

// normalize turns json.Number into int64 or float64, as the API machinery's own decoder does,
// so that metadata.generation and status.observedGeneration read as integers.
func normalize(value interface{}) interface{} {
	switch v := value.(type) {
	case map[string]interface{}:
		for key, item := range v {
			v[key] = normalize(item)
		}
		return v
	case []interface{}:
		for i, item := range v {
			v[i] = normalize(item)
		}
		return v
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	default:
		return value
	}
}
