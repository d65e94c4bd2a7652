"""The operator's API: the four kinds of valkey.gomomento.com/v1alpha1 as attrs models."""
