package cli

import (
	"github.com/spf13/cobra"

	"github.com/nvstripe/nvstripe/internal/buildinfo"
)

func newVersionCmd(*globals) *cobra.Command {
	c := &cobra.Command{
		Use:         "version",
		Short:       "Print the nvstripe version",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annotationNoSelfTest: "yes"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildinfo.Read()
			return report(cmd, v, "%s", v)
		},
	}
	return c
}
