# Mint an unsigned JWT for tests: header.payload.signature, base64url.
# Usage: mint_jwt '{"sub":"u-alice","token_type":"access"}'
b64url() {
	base64 -w0 | tr '+/' '-_' | tr -d '='
}

mint_jwt() {
	local header payload
	header=$(printf '%s' '{"alg":"RS256","typ":"JWT"}' | b64url)
	payload=$(printf '%s' "$1" | b64url)
	printf '%s.%s.%s' "$header" "$payload" "c2lnbmF0dXJl"
}
