package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // kind/name of each object
		wantErr bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "one", in: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n", want: []string{"Namespace/a"}},
		{
			name: "several with empty and comment-only documents",
			in:   "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: c\n",
			want: []string{"ConfigMap/b", "Secret/c"},
		},
		{name: "json", in: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"j"}}`, want: []string{"Namespace/j"}},
		{name: "malformed", in: "apiVersion: v1\nkind: [unclosed\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}
