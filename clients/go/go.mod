module lockwarden/clients/go

go 1.19
