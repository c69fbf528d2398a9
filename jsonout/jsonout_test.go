package jsonout

import (
	"bytes"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, map[string]int{"used_bytes": 3}); err != nil || b.String() != "{\n  \"used_bytes\": 3\n}\n" {
		t.Errorf("plain: %q %v", b.String(), err)
	}
	b.Reset()
	if err := Write(&b, wrapperspb.String("x")); err != nil || b.String() != "\"x\"\n" {
		t.Errorf("message: %q %v", b.String(), err)
	}
	b.Reset()
	st, _ := structpb.NewStruct(map[string]any{"a_b": 1})
	if err := Write(&b, []*structpb.Struct{st, st}); err != nil {
		t.Fatal(err)
	}
	var got []map[string]float64
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || len(got) != 2 || got[1]["a_b"] != 1 {
		t.Errorf("slice of messages: %q %v", b.String(), err)
	}
	b.Reset()
	if err := Write(&b, []*structpb.Struct(nil)); err != nil || b.String() != "[]\n" {
		t.Errorf("empty slice: %q %v", b.String(), err)
	}
}
