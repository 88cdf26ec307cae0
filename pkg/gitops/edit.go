package gitops

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
