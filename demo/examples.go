package demo

// DefaultURL is the NBD URL of a demo started with the default flags.
const DefaultURL = "nbd://" + defaultNBDListen + "/demo"

// Example is a shell command to try on a running demo, with what it shows.
type Example struct {
	Command, Says string
}

// Examples are the commands `nvstripe demo --help` (and README.md) suggest
// for a demo serving url: print the export's size, then write size bytes
// (a head -c count, "1G") of random data through it, copied from the file
// fill. nbdcopy copies to the end of its source and sizes its progress bar
// from it: /dev/urandom has no end, so copying from it sits at 0 % and then
// fails past the end of the volume; a pipe has no size, so the bar stays at
// 0 % until the end. A file of random bytes has both.
func Examples(url, size, fill string) []Example {
	return []Example{
		{"nbdinfo " + url, "the export's size and features"},
		{"head -c " + size + " /dev/urandom > " + fill, "a sized source of random data"},
		{"nbdcopy --progress " + fill + " " + url, "writes it into the volume; the demo prints MB/s"},
	}
}
