// Package jsonout writes a command's result as indented JSON: plain Go
// values through encoding/json, protobuf messages (and slices of them) with
// the field names of their .proto files (snake_case; zero values included,
// so that keys are stable). Every integer is a JSON number: protojson's
// mapping, which writes 64-bit integers as strings, is used only for the
// google.protobuf well-known types.
package jsonout

import (
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var marshal = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// Write writes v to w as indented JSON followed by a newline.
func Write(w io.Writer, v any) error {
	v, err := protoRaw(v)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// protoRaw returns a proto message, or a slice of them, as raw JSON (a
// slice as an array, never null); other values unchanged.
func protoRaw(v any) (any, error) {
	if m, ok := v.(proto.Message); ok {
		b, err := messageJSON(m.ProtoReflect())
		return json.RawMessage(b), err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || !rv.Type().Elem().Implements(reflect.TypeFor[proto.Message]()) {
		return v, nil
	}
	out := make([]json.RawMessage, 0, rv.Len())
	for i := range rv.Len() {
		b, err := messageJSON(rv.Index(i).Interface().(proto.Message).ProtoReflect())
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// WriteRecord writes v as one line of compact JSON, a record of a stream
// (NDJSON): an object gets the field "time", at in RFC 3339, first; any
// other value is written as {"time": ..., "value": v}.
func WriteRecord(w io.Writer, at time.Time, v any) error {
	v, err := protoRaw(v)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	stamp := `{"time":` + strconv.Quote(at.Format(time.RFC3339Nano))
	switch {
	case string(b) == "{}":
		b = []byte(stamp + "}")
	case b[0] == '{':
		b = append([]byte(stamp+","), b[1:]...)
	default:
		b = append(append([]byte(stamp+`,"value":`), b...), '}')
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
