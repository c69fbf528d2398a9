package api

import (
	"encoding/json"
	"fmt"
)

// Codec is the gRPC codec of this API: messages as JSON. Its name, "json",
// is the gRPC content-subtype.
type Codec struct{}

// Marshal encodes v as JSON.
func (Codec) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("api: encoding %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes JSON data into v. An empty message leaves v as is.
func (Codec) Unmarshal(data []byte, v any) error {
	if len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("api: decoding %T: %w", v, err)
	}
	return nil
}

// Name is the content-subtype.
func (Codec) Name() string { return "json" }
