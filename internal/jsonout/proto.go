package jsonout

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// wellKnown names the google.protobuf types whose JSON form the proto3
// mapping defines specially (a Timestamp is a string, a Struct an object,
// a wrapper its value): protojson writes them as they are.
var wellKnown = map[protoreflect.FullName]bool{
	"google.protobuf.Any": true, "google.protobuf.Timestamp": true, "google.protobuf.Duration": true,
	"google.protobuf.Struct": true, "google.protobuf.Value": true, "google.protobuf.ListValue": true,
	"google.protobuf.FieldMask": true, "google.protobuf.Empty": true,
	"google.protobuf.DoubleValue": true, "google.protobuf.FloatValue": true, "google.protobuf.Int64Value": true,
	"google.protobuf.UInt64Value": true, "google.protobuf.Int32Value": true, "google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue": true, "google.protobuf.StringValue": true, "google.protobuf.BytesValue": true,
}

// messageJSON writes m as a JSON object: its fields in .proto order under
// their .proto names, unset ones as zero values (an unset message as null;
// an unset member of a oneof left out). It differs from protojson in one
// way: 64-bit integers are JSON numbers, not strings, so that every integer
// a command prints reads the same way.
func messageJSON(m protoreflect.Message) ([]byte, error) {
	if wellKnown[m.Descriptor().FullName()] {
		return marshal.Marshal(m.Interface())
	}
	b := []byte{'{'}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !m.Has(fd) {
			continue
		}
		v, err := fieldJSON(m, fd)
		if err != nil {
			return nil, err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, string(fd.Name()))
		b = append(b, ':')
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// fieldJSON writes one field's value: a list as an array, a map as an
// object, else one value.
func fieldJSON(m protoreflect.Message, fd protoreflect.FieldDescriptor) ([]byte, error) {
	switch {
	case fd.IsList():
		return listJSON(m.Get(fd).List(), fd)
	case fd.IsMap():
		return mapJSON(m.Get(fd).Map(), fd.MapValue())
	case fd.Message() != nil && !m.Has(fd):
		return []byte("null"), nil
	}
	return valueJSON(m.Get(fd), fd)
}

func listJSON(l protoreflect.List, fd protoreflect.FieldDescriptor) ([]byte, error) {
	b := []byte{'['}
	for i := range l.Len() {
		v, err := valueJSON(l.Get(i), fd)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']'), nil
}

// mapJSON writes a map field as an object with its keys sorted.
func mapJSON(mp protoreflect.Map, vd protoreflect.FieldDescriptor) ([]byte, error) {
	vals := map[string]protoreflect.Value{}
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		vals[k.String()] = v
		return true
	})
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := []byte{'{'}
	for i, k := range keys {
		v, err := valueJSON(vals[k], vd)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k)
		b = append(append(b, ':'), v...)
	}
	return append(b, '}'), nil
}

// valueJSON writes one scalar or message value of field fd's kind.
func valueJSON(v protoreflect.Value, fd protoreflect.FieldDescriptor) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(nil, v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(nil, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(nil, v.Uint(), 10), nil
	case protoreflect.FloatKind:
		return floatJSON(v.Float(), 32)
	case protoreflect.DoubleKind:
		return floatJSON(v.Float(), 64)
	case protoreflect.StringKind:
		return json.Marshal(v.String())
	case protoreflect.BytesKind:
		return strconv.AppendQuote(nil, base64.StdEncoding.EncodeToString(v.Bytes())), nil
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return strconv.AppendQuote(nil, string(ev.Name())), nil
		}
		return strconv.AppendInt(nil, int64(v.Enum()), 10), nil
	default: // message or group
		return messageJSON(v.Message())
	}
}

// floatJSON writes f as a JSON number; NaN and the infinities, which JSON
// has no number for, as protojson spells them ("NaN", "Infinity").
func floatJSON(f float64, bits int) ([]byte, error) {
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, bits), nil
}
