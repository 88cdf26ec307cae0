package charttest

import (
	"fmt"
	"net"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
)

// AliasedKubeconfig is the kubeconfig at path with its API servers on the
// host's loopback named by hostAlias (a real node's Gateway, with
// localfleet.RealNodeOptions.HostLoopback: how the node's pods reach them),
// their certificates still checked for 127.0.0.1 (tls-server-name) when
// they serve HTTPS.
func AliasedKubeconfig(path, hostAlias string) ([]byte, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	for _, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, fmt.Errorf("parsing server %q of %s: %w", c.Server, path, err)
		}
		if u.Hostname() == "127.0.0.1" {
			u.Host = net.JoinHostPort(hostAlias, u.Port())
			c.Server = u.String()
			if u.Scheme == "https" {
				c.TLSServerName = "127.0.0.1"
			}
		}
	}
	return clientcmd.Write(*kc)
}
