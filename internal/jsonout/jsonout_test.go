package jsonout

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

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

// TestWriteIntegersAsNumbers: a message's 64-bit integers are JSON numbers
// (protojson writes them as strings), its fields keep their .proto names
// and order, and unset fields are written as zero values.
func TestWriteIntegersAsNumbers(t *testing.T) {
	var b bytes.Buffer
	m := &descriptorpb.UninterpretedOption{PositiveIntValue: proto.Uint64(1 << 40), NegativeIntValue: proto.Int64(-5),
		Name: []*descriptorpb.UninterpretedOption_NamePart{{NamePart: proto.String("a"), IsExtension: proto.Bool(true)}}}
	if err := Write(&b, m); err != nil {
		t.Fatal(err)
	}
	want := `{"name":[{"name_part":"a","is_extension":true}],"identifier_value":"","positive_int_value":1099511627776,` +
		`"negative_int_value":-5,"double_value":0,"string_value":"","aggregate_value":""}`
	var got bytes.Buffer
	if err := json.Compact(&got, b.Bytes()); err != nil || got.String() != want {
		t.Errorf("got  %s (%v)\nwant %s", got.String(), err, want)
	}
}

// TestWriteRecord: one line per value, each an object whose first field
// is the time.
func TestWriteRecord(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 12, 6, 6, 30, 0, 5e8, time.UTC)
	m := &descriptorpb.UninterpretedOption{PositiveIntValue: proto.Uint64(7)}
	for _, v := range []any{m, map[string]int{}, []int{1}} {
		if err := WriteRecord(&b, at, v); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{`{"time":"2026-12-06T06:30:00.5Z","name":[],"identifier_value":"","positive_int_value":7,`,
		`{"time":"2026-12-06T06:30:00.5Z"}`, `{"time":"2026-12-06T06:30:00.5Z","value":[1]}`}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], want[0]) || lines[1] != want[1] || lines[2] != want[2] {
		t.Errorf("records:\n%s\nwant\n%s", b.String(), strings.Join(want, "\n"))
	}
}
