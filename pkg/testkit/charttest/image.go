package charttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildImage builds flotilla's image for this machine's platform (linux/amd64)
// with the tool `make image` runs, from the module at moduleDir, and pushes it
// to repo with the given tag; it returns its reference by digest. dir holds
// the tool's digest file.
func BuildImage(ctx context.Context, moduleDir, repo, tag, dir string) (string, error) {
	refFile := filepath.Join(dir, "image.ref")
	cmd := exec.CommandContext(ctx, "go", "run", "./deploy/tools/image", "-repo", repo, "-tag", tag, "-platforms", "linux/amd64", "-digest-file", refFile)
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the image: %w\n%s", err, out)
	}
	ref, err := os.ReadFile(refFile)
	if err != nil {
		return "", fmt.Errorf("reading the image's digest: %w", err)
	}
	return strings.TrimSpace(string(ref)), nil
}
