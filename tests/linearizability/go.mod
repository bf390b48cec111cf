module github.com/agentvfs/agentvfs/tests/linearizability

go 1.26.0

require (
	github.com/agentvfs/agentvfs/clients/go v0.0.0
	github.com/anishathalye/porcupine v1.3.1
	google.golang.org/grpc v1.85.0
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/agentvfs/agentvfs/clients/go => ../../clients/go
