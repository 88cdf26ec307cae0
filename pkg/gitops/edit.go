package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Edit changes the image in one file's bytes. Apply returns the new bytes
// and whether they differ from src; an edit with nothing to change returns src
// and false. It never re-encodes the document: everything but the changed
// scalars (comments, blank lines, key order, quoting, indentation) is kept
// byte for byte. Errors name the YAML path and are permanent.
//
// The implementations are Kustomize, HelmValues and Manifest.
type Edit interface {
	Apply(src []byte, img Image) ([]byte, bool, error)
}

var (
	_ Edit = Kustomize{}
	_ Edit = HelmValues{}
	_ Edit = Manifest{}
)

// Edit kinds, by name (config's gitops.edit, the bump-image task's
// git-edit param).
const (
	EditKustomize = "kustomize"
	EditHelm      = "helm"
	EditManifest  = "manifest"
)

// NewEdit builds the edit of kind (EditKustomize, EditHelm, EditManifest)
// from its options, a JSON object of the edit's fields ("" for none).
// Unknown kinds and fields are permanent errors.
func NewEdit(kind, options string) (Edit, error) {
	decode := func(dst any) error {
		if strings.TrimSpace(options) == "" {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(options)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return fault.Permanent(fmt.Errorf("decoding the %s edit's options: %w", kind, err))
		}
		return nil
	}
	switch kind {
	case EditKustomize, "":
		var e Kustomize
		if err := decode(&e); err != nil {
			return nil, err
		}
		return e, nil
	case EditHelm:
		var e HelmValues
		if err := decode(&e); err != nil {
			return nil, err
		}
		return e, nil
	case EditManifest:
		var e Manifest
		if err := decode(&e); err != nil {
			return nil, err
		}
		return e, nil
	default:
		return nil, fault.Permanent(fmt.Errorf("edit %q: want %s, %s or %s", kind, EditKustomize, EditHelm, EditManifest))
	}
}
