package config

import (
	"fmt"
	"io"

	"github.com/nvstripe/nvstripe/internal/table"
)

// WriteSettings prints resolved settings for people (`nvstripe config
// show`): key, value ("-" when empty) and where it came from.
func WriteSettings(w io.Writer, vs []Value) error {
	tw := table.New(w)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, v := range vs {
		value := v.Value
		if value == "" {
			value = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Key, value, v.Source)
	}
	return tw.Flush()
}
