package cli

// hostTraddrUsage is the help of every --host-traddr flag.
const hostTraddrUsage = "local IP address the connections to targets leave from, as nvme-cli's --host-traddr (pin storage traffic to one NIC; default: by route)"
