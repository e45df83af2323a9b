#!/usr/bin/env bash
# Test-only TLS material for tests/backends/test_http_client.py (a CA and a certificate for
# the host name vllm.test). Never use these keys for anything else. Made with OpenSSL 3:
#   bash tests/backends/tls/make.sh
set -euo pipefail
cd "$(dirname "$0")"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 36500 \
  -subj "/CN=qualgate test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=vllm.test"
printf "subjectAltName=DNS:vllm.test\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n" > ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
  -days 36500 -extfile ext.cnf
rm -f server.csr ext.cnf ca.key ca.srl
