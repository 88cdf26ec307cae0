package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseProxy reads one of server.trustedProxies: a CIDR, or one IP
// address (a prefix of its full length).
func ParseProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor a CIDR (such as 10.0.0.0/8)", s)
	}
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

// Proxies is server.trustedProxies parsed (Load validated them; one that
// does not parse is left out).
func (s Server) Proxies() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.TrustedProxies))
	for _, p := range s.TrustedProxies {
		if pp, err := ParseProxy(p); err == nil {
			out = append(out, pp)
		}
	}
	return out
}
