package gitops_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
)

func TestNewEdit(t *testing.T) {
	tests := []struct {
		kind, options string
		want          gitops.Edit
		wantErr       bool
	}{
		{kind: "", want: gitops.Kustomize{}},
		{kind: gitops.EditKustomize, want: gitops.Kustomize{}},
		{kind: gitops.EditHelm, want: gitops.HelmValues{}},
		{kind: gitops.EditManifest, want: gitops.Manifest{}},
		{kind: "jsonnet", wantErr: true},
		{kind: gitops.EditHelm, options: `{"noSuchField": 1}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.kind+tt.options, func(t *testing.T) {
			got, err := gitops.NewEdit(tt.kind, tt.options)
			if tt.wantErr {
				if err == nil || !fault.IsPermanent(err) {
					t.Fatalf("NewEdit(%q, %q) = %v, %v; want a permanent error", tt.kind, tt.options, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NewEdit(%q) (-want +got):\n%s", tt.kind, diff)
			}
		})
	}
}
