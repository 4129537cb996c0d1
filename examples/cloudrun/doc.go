// Package cloudrun holds no code: it is the Cloud Run example of
// docs/deploy.md, a service (service.yaml) that runs the Node.js receiver
// of examples/node-receiver as its ingress container and ferry as a
// sidecar, with ferry's configuration (ferry.yaml) mounted from Secret
// Manager.
//
// Its test keeps the two files and the repository's Dockerfile in
// agreement, since Cloud Run would accept most mismatches and fail only at
// run time: the webhook URL must point at the ingress container's port;
// ferry's probes at its listen port (a sidecar gets no PORT variable);
// the secret volume must put the file where the image's ENTRYPOINT reads
// it; every ${NAME} of ferry.yaml must come from a secret; and the
// annotations must keep CPU allocated, an instance running and ferry
// starting after the app.
package cloudrun
