package wire

// Status is proxy_status_t, the result of every env.proxy_* host function (spec "Status
// codes"). The values missing here (5, 9, 11) are not used by ABI v0.2.1.
type Status uint32

const (
	StatusOK                  Status = 0
	StatusNotFound            Status = 1
	StatusBadArgument         Status = 2
	StatusSerializationFailed Status = 3
	StatusParseFailure        Status = 4
	StatusInvalidMemoryAccess Status = 6
	StatusEmpty               Status = 7
	StatusCasMismatch         Status = 8
	StatusInternalFailure     Status = 10
	StatusUnimplemented       Status = 12
)
