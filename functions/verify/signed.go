package verify

import "github.com/flotilla-cd/flotilla/pkg/config"

// SignedApps is what WithSignatures' signed says of image under cfg: the
// applications tracking image that verify its signatures, each with
// whether the first wave it targets requires a signature, and whether
// another application tracking it verifies none (others). A release set's
// image member with a verify of its own is one of them, its first wave the
// set's (the set's clusterSelector); one without is another
// (docs/design/release-sets.md, "Image members").
func SignedApps(cfg *config.Config, image string) (apps []SignedApp, others bool) {
	for _, a := range cfg.Applications {
		if !config.SameImage(a.Image, image) {
			continue
		}
		if a.Verify == nil {
			others = true
			continue
		}
		apps = append(apps, SignedApp{Name: a.Name, FirstWaveRequires: firstWaveRequires(cfg, a)})
	}
	return apps, others
}

// firstWaveRequires tells whether the first wave app targets requires a
// signature; a set's member targets the set's clusters.
func firstWaveRequires(cfg *config.Config, app config.Application) bool {
	if app.MemberOf != "" {
		if s, ok := cfg.Application(app.MemberOf); ok {
			app = s
		}
	}
	for _, w := range cfg.Fleet.Waves {
		for _, n := range w.ClusterNames() {
			if c, ok := cfg.Cluster(n); ok && app.Targets(c) {
				return w.Policy(cfg.Fleet.WavePolicy).SignatureRequired()
			}
		}
	}
	return true
}
