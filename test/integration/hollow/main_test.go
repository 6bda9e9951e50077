//go:build integration

package hollow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
	"github.com/podsync/podsync/internal/testing/localkube"
)

var (
	// repo is the checkout.
	repo string
	// kubeBin holds the Kubernetes binaries.
	kubeBin string
	// hollowBin and vkBin are the hollow node and podsync-vk TestMain
	// built.
	hollowBin, vkBin string
)

func TestMain(m *testing.M) {
	code, err := setup()
	if err == nil {
		code = m.Run()
		err = teardown()
	}
	if err != nil {
		// A control plane that cannot be built fails the run: this
		// package never skips.
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func setup() (int, error) {
	var err error
	if repo, err = localcri.RepoDir(); err != nil {
		return 1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	// The first build takes about 15 minutes on 2 cores; later runs find
	// the binaries under .tmp/kube.
	if kubeBin, err = localkube.Build(ctx, repo, os.Stderr); err != nil {
		return 1, err
	}
	dir, err := os.MkdirTemp("", "podsync-hollow-bin-")
	if err != nil {
		return 1, err
	}
	hollowBin, vkBin = filepath.Join(dir, "podsyncd-hollow"), filepath.Join(dir, "podsync-vk")
	if err := localcritest.Build(vkBin, "./cmd/podsync-vk"); err != nil {
		return 1, err
	}
	return 0, localcritest.Build(hollowBin, "./hack/hollow")
}

func teardown() error {
	var errs []error
	for _, b := range []string{hollowBin, vkBin} {
		if pids := localcritest.ProcessesOf(b); len(pids) > 0 {
			errs = append(errs, fmt.Errorf("%s processes left running: %v", filepath.Base(b), pids))
		}
	}
	errs = append(errs, os.RemoveAll(filepath.Dir(hollowBin)))
	return errors.Join(errs...)
}
