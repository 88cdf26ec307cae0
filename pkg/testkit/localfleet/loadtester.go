package localfleet

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// startLoadTester runs Flagger's load tester as a host process, with hey on
// its PATH: Flagger's webhooks post it the commands to run during analysis.
func (f *Fleet) startLoadTester(ctx context.Context, bins binaries, port int) error {
	f.LoadTesterURL = "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	args := []string{"-port=" + strconv.Itoa(port), "-log-level=info", "-timeout=10m", "-zap-encoding=console"}
	env := []string{"PATH=" + bins.heyDir() + string(filepath.ListSeparator) + os.Getenv("PATH")}
	p, err := startProcess(ctx, f.Dir, "loadtester", bins.loadTester(), args, env, f.DieWithParent)
	if err != nil {
		return err
	}
	if err := f.recordService(p); err != nil {
		return err
	}
	return waitFor(ctx, p, time.Minute, "load tester healthy", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, f.LoadTesterURL+"healthz", ""), nil
	})
}
