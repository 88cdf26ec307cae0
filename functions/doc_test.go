package functions_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/functions/advance"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/functions/rollback"
	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Each function's doc.go says what it consumes: exactly what Consumes()
// returns (dispatch routes by Consumes; a reader goes by the doc).
func TestDocListsWhatEachFunctionConsumes(t *testing.T) {
	cfg := &config.Config{}
	for name, consumes := range map[string][]string{
		"advance":  advance.New(cfg, nil, nil).Consumes(),
		"launch":   launch.New(cfg, nil, nil).Consumes(),
		"observe":  observe.New(cfg, nil, nil, nil).Consumes(),
		"plan":     plan.New(cfg, nil, nil).Consumes(),
		"rollback": rollback.New(cfg, nil, nil, nil).Consumes(),
		"verify":   verify.New(nil, nil).Consumes(),
	} {
		t.Run(name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(name, "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			doc := f.Doc.Text()
			_, after, ok := strings.Cut(doc, "Consumes:")
			if !ok {
				t.Fatalf("%s/doc.go has no Consumes: section", name)
			}
			section, _, _ := strings.Cut(after, "Emits:")
			listed := regexp.MustCompile(`dev\.flotilla\.[a-z.]+\.v\d+`).FindAllString(section, -1)
			slices.Sort(listed)
			want := slices.Clone(consumes)
			slices.Sort(want)
			if diff := cmp.Diff(want, listed); diff != "" {
				t.Errorf("%s/doc.go's Consumes: (-Consumes() +doc)\n%s", name, diff)
			}
		})
	}
}
