package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/ec"
)

func newSelfTestCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "selftest",
		Short: "Run the erasure-code self-test (also run at every start)",
		Long: "selftest encodes and reconstructs known vectors (2+1, 4+2, 8+3, 16+4) with vector\n" +
			"instructions on and off and compares them with golden checksums.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationNoSelfTest: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			if err := ec.SelfTest(); err != nil {
				return err
			}
			took := time.Since(start).Round(time.Millisecond)
			return report(cmd, map[string]any{"ec_self_test": "ok", "seconds": took.Seconds()}, "ec self-test: ok (%v)", took)
		},
	}
}
