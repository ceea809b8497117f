"""Sign-in and policy: bearer tokens (`tokens`) checked against the issuer's cached signing
keys (`jwks`), the policy as data (`policy`), a mutation's gate on its arguments
(`authorize`), and who may run an operation or read personal data (`access`)."""
