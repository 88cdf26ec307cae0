package store

import "encoding/json"

// Codec is a document that decodes and encodes itself: the store passes it
// the stored bytes instead of unmarshalling them into it, and stores what
// it encodes. A caller that keeps documents decoded (the rollouts in
// flight, one JSON document of 1,001 clusters each in a wave of 1,000) uses
// it to skip decoding bytes it decoded or encoded before. raw is valid only
// during DecodeDocument; the bytes EncodeDocument returns must not change
// afterwards.
type Codec interface {
	DecodeDocument(raw []byte) error
	EncodeDocument() ([]byte, error)
}

// decode unmarshals raw into v, or lets v decode itself.
func decode(raw []byte, v any) error {
	if c, ok := v.(Codec); ok {
		return c.DecodeDocument(raw)
	}
	return json.Unmarshal(raw, v)
}

// encode marshals v, or lets v encode itself.
func encode(v any) ([]byte, error) {
	if c, ok := v.(Codec); ok {
		return c.EncodeDocument()
	}
	return json.Marshal(v)
}
