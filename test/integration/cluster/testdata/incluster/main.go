// Command incluster is an in-cluster client, as a controller in a pod is
// one: every two seconds it reads the pod's service-account token and CA
// anew from /var/run/secrets/kubernetes.io/serviceaccount, lists the pods
// of its namespace at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// and prints one line: "pods N token T" (T a short digest of the token)
// or the error. "incluster token" prints the token once and exits. The
// cluster tests run it in a pod.
package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const dir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "token" {
		b, err := os.ReadFile(dir + "/token")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(string(b))
		return
	}
	for {
		fmt.Println(once())
		time.Sleep(2 * time.Second)
	}
}

func once() string {
	token, err := os.ReadFile(dir + "/token")
	if err != nil {
		return "error: " + err.Error()
	}
	ca, err := os.ReadFile(dir + "/ca.crt")
	if err != nil {
		return "error: " + err.Error()
	}
	ns, err := os.ReadFile(dir + "/namespace")
	if err != nil {
		return "error: " + err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "error: no certificate in ca.crt"
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/api/v1/namespaces/"+strings.TrimSpace(string(ns))+"/pods", nil)
	if err != nil {
		return "error: " + err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("error: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("pods %d token %.12x", len(list.Items), sha256.Sum256(token))
}
