package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// cluster is what a run started: the S3 server, the proxies, the agentvfs
// servers.
type cluster struct {
	s3      *s3Server
	proxies []*proxy
	nodes   []*node
}

// startCluster starts what spec needs: versitygw and the proxies for the
// object tier, then the agentvfs servers, all in dir.
func startCluster(spec runSpec, opt options, dir string) (*cluster, error) {
	c := &cluster{}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return c, err
	}
	env := append(baseEnv(), "RUST_LOG=agentvfs=info")
	if spec.tier == "object" {
		s3, err := startS3(opt.versitygw, dir)
		if err != nil {
			return c, err
		}
		c.s3 = s3
		env = append(env, "AWS_ACCESS_KEY_ID="+s3AccessKey, "AWS_SECRET_ACCESS_KEY="+s3SecretKey,
			"AWS_REGION=us-east-1", "AWS_ALLOW_HTTP=true")
	}
	for i := range spec.servers {
		ndir := filepath.Join(dir, fmt.Sprintf("server-%d", i))
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			return c, err
		}
		endpoint := ""
		if c.s3 != nil {
			endpoint = c.s3.addr
		}
		if spec.proxy {
			p, err := startProxy(endpoint, defaultFaults, opt.seed+int64(i))
			if err != nil {
				return c, err
			}
			c.proxies = append(c.proxies, p)
			endpoint = p.addr()
		}
		n, err := startNode(i, opt.bin, ndir, spec.config(data, endpoint), append(env, "XDG_DATA_HOME="+ndir))
		if err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// stop ends every process the cluster started.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
	for _, p := range c.proxies {
		p.stop()
	}
	if c.s3 != nil {
		c.s3.stop()
	}
}
